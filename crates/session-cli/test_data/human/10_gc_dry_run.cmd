gc
--older-than
30d
--dry-run
