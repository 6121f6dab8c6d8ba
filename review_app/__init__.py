"""Role Review: human review of chatbot conversations for role adherence."""

__version__ = "0.1.0"
