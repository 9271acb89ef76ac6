"""Mail storage: the MailStore ABC (base), the SQLite store (sqlite) and the in-memory fake (memory)."""
