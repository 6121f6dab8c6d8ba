"""Persistence for Role Review: SQLModel tables, engines, queries and migrations."""
