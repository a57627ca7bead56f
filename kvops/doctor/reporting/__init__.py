"""The findings as text or JSON."""
