env:SESSIONS_FORCE_TTY=160
sessions
--all
--utc
