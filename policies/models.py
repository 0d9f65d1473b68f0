"""Database models of schedweb (policies, versions, audit, sync runs)."""
