from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Payload(_message.Message):
    __slots__ = ("id", "name", "tags", "metrics")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    metrics: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., metrics: _Optional[_Iterable[float]] = ...) -> None: ...

class Address(_message.Message):
    __slots__ = ("street", "city", "region", "postal_code", "country")
    STREET_FIELD_NUMBER: _ClassVar[int]
    CITY_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    POSTAL_CODE_FIELD_NUMBER: _ClassVar[int]
    COUNTRY_FIELD_NUMBER: _ClassVar[int]
    street: str
    city: str
    region: str
    postal_code: str
    country: str
    def __init__(self, street: _Optional[str] = ..., city: _Optional[str] = ..., region: _Optional[str] = ..., postal_code: _Optional[str] = ..., country: _Optional[str] = ...) -> None: ...

class Customer(_message.Message):
    __slots__ = ("customer_id", "email", "name", "tier", "marketing_opt_in", "address")
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    MARKETING_OPT_IN_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    customer_id: int
    email: str
    name: str
    tier: str
    marketing_opt_in: bool
    address: Address
    def __init__(self, customer_id: _Optional[int] = ..., email: _Optional[str] = ..., name: _Optional[str] = ..., tier: _Optional[str] = ..., marketing_opt_in: _Optional[bool] = ..., address: _Optional[_Union[Address, _Mapping]] = ...) -> None: ...

class LineItem(_message.Message):
    __slots__ = ("sku", "name", "quantity", "unit_price", "discount")
    SKU_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    UNIT_PRICE_FIELD_NUMBER: _ClassVar[int]
    DISCOUNT_FIELD_NUMBER: _ClassVar[int]
    sku: str
    name: str
    quantity: int
    unit_price: float
    discount: float
    def __init__(self, sku: _Optional[str] = ..., name: _Optional[str] = ..., quantity: _Optional[int] = ..., unit_price: _Optional[float] = ..., discount: _Optional[float] = ...) -> None: ...

class Payment(_message.Message):
    __slots__ = ("method", "card_last4", "currency", "amount", "captured")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    CARD_LAST4_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_FIELD_NUMBER: _ClassVar[int]
    CAPTURED_FIELD_NUMBER: _ClassVar[int]
    method: str
    card_last4: str
    currency: str
    amount: float
    captured: bool
    def __init__(self, method: _Optional[str] = ..., card_last4: _Optional[str] = ..., currency: _Optional[str] = ..., amount: _Optional[float] = ..., captured: _Optional[bool] = ...) -> None: ...

class OrderEvent(_message.Message):
    __slots__ = ("event_id", "event_type", "occurred_at_ms", "schema_version", "source", "order_id", "status", "currency", "customer", "shipping_address", "items", "payment", "subtotal", "tax", "shipping_cost", "total", "tags", "session_id", "user_agent", "gift", "coupon_code")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    SHIPPING_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    PAYMENT_FIELD_NUMBER: _ClassVar[int]
    SUBTOTAL_FIELD_NUMBER: _ClassVar[int]
    TAX_FIELD_NUMBER: _ClassVar[int]
    SHIPPING_COST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_AGENT_FIELD_NUMBER: _ClassVar[int]
    GIFT_FIELD_NUMBER: _ClassVar[int]
    COUPON_CODE_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    event_type: str
    occurred_at_ms: int
    schema_version: int
    source: str
    order_id: str
    status: str
    currency: str
    customer: Customer
    shipping_address: Address
    items: _containers.RepeatedCompositeFieldContainer[LineItem]
    payment: Payment
    subtotal: float
    tax: float
    shipping_cost: float
    total: float
    tags: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    user_agent: str
    gift: bool
    coupon_code: str
    def __init__(self, event_id: _Optional[str] = ..., event_type: _Optional[str] = ..., occurred_at_ms: _Optional[int] = ..., schema_version: _Optional[int] = ..., source: _Optional[str] = ..., order_id: _Optional[str] = ..., status: _Optional[str] = ..., currency: _Optional[str] = ..., customer: _Optional[_Union[Customer, _Mapping]] = ..., shipping_address: _Optional[_Union[Address, _Mapping]] = ..., items: _Optional[_Iterable[_Union[LineItem, _Mapping]]] = ..., payment: _Optional[_Union[Payment, _Mapping]] = ..., subtotal: _Optional[float] = ..., tax: _Optional[float] = ..., shipping_cost: _Optional[float] = ..., total: _Optional[float] = ..., tags: _Optional[_Iterable[str]] = ..., session_id: _Optional[str] = ..., user_agent: _Optional[str] = ..., gift: _Optional[bool] = ..., coupon_code: _Optional[str] = ...) -> None: ...

class Stop(_message.Message):
    __slots__ = ("stop_id", "eta", "kind")
    STOP_ID_FIELD_NUMBER: _ClassVar[int]
    ETA_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    stop_id: int
    eta: float
    kind: str
    def __init__(self, stop_id: _Optional[int] = ..., eta: _Optional[float] = ..., kind: _Optional[str] = ...) -> None: ...

class Vehicle(_message.Message):
    __slots__ = ("vehicle_id", "shift", "capacity", "path", "stops")
    VEHICLE_ID_FIELD_NUMBER: _ClassVar[int]
    SHIFT_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    STOPS_FIELD_NUMBER: _ClassVar[int]
    vehicle_id: int
    shift: str
    capacity: float
    path: _containers.RepeatedScalarFieldContainer[float]
    stops: _containers.RepeatedCompositeFieldContainer[Stop]
    def __init__(self, vehicle_id: _Optional[int] = ..., shift: _Optional[str] = ..., capacity: _Optional[float] = ..., path: _Optional[_Iterable[float]] = ..., stops: _Optional[_Iterable[_Union[Stop, _Mapping]]] = ...) -> None: ...

class RoutePlan(_message.Message):
    __slots__ = ("plan_id", "created_at_ms", "version", "depot_lat", "depot_lon", "costs", "vehicles")
    PLAN_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DEPOT_LAT_FIELD_NUMBER: _ClassVar[int]
    DEPOT_LON_FIELD_NUMBER: _ClassVar[int]
    COSTS_FIELD_NUMBER: _ClassVar[int]
    VEHICLES_FIELD_NUMBER: _ClassVar[int]
    plan_id: str
    created_at_ms: int
    version: int
    depot_lat: float
    depot_lon: float
    costs: _containers.RepeatedScalarFieldContainer[float]
    vehicles: _containers.RepeatedCompositeFieldContainer[Vehicle]
    def __init__(self, plan_id: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., version: _Optional[int] = ..., depot_lat: _Optional[float] = ..., depot_lon: _Optional[float] = ..., costs: _Optional[_Iterable[float]] = ..., vehicles: _Optional[_Iterable[_Union[Vehicle, _Mapping]]] = ...) -> None: ...
