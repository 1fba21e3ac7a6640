env:SESSIONS_FORCE_TTY=120
env:TZ=PST8
runs
--limit
4
