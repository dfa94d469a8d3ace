"""`codec-schema`: show, derive and check the three forms of a user's message type."""
