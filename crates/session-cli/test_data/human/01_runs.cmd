runs
--utc
