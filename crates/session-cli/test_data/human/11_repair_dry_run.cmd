repair
--dry-run
