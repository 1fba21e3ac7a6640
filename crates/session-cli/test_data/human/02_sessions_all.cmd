sessions
--all
--utc
