"""Two control-plane replicas on PostgreSQL, installed with helm (issue 11, item 4),
losing a part mid-turn: the leader (test_leader_kills), the database server
(test_store_restarts)."""
