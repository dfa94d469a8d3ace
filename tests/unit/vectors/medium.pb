
evt-000000000042order.createdšØê¶·3 *ios2ord-9855630065:	deliveredBEURJ_Â¡user37058@example.comSale Stable"bronze(2+
880 Green StreetBerlinwest"28907*ITR,
121 Store StreetBerlinsouth"23507*ITZ#

SKU-258176
sale south!R¸…ëÑ.@Z%

SKU-483452store stable!\Âõ(ÜE@Z(

SKU-554710new v2!ÍÌÌÌÌ3@)333333Ã?b
mbway3078EUR!®Gázht@(iö(\Âq@qö(\Â5K@®Gázht@ŠwebŠwest’907a70c31012f037š?Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/126.0 