"""Kubernetes: the client, its threads and the label keys Helmr uses."""
