"""The signed effect journal, its keys and receipts (private)."""
