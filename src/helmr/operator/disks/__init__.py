"""The Computer disk: each Workspace's claims, saves and restores."""
