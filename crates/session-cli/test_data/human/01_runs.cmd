env:SESSIONS_FORCE_TTY=160
runs
--utc
