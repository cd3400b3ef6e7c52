"""The database backends: ``sqlite`` (one machine) and ``postgresql`` (several nodes)."""
