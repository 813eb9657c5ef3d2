"""Device-taint eviction (KEP-5055): pure decisions plus the kopf controller shell."""
