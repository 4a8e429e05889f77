"""Services, one per mechanism: each function takes a `Caller` (the shared engine and an owner)."""
