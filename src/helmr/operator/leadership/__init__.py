"""Which control-plane replica leads: the Lease and the leader's work."""
