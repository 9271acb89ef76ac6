"""Mail storage: the MailStore ABC (base), SQLite store (sqlite), in-memory fake (memory)."""
