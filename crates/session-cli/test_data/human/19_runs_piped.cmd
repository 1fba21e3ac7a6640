runs
--limit
3
