"""Runner processes: their pods, what the pods report, their identity and limits."""
