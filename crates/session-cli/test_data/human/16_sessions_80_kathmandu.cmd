env:SESSIONS_FORCE_TTY=80
env:TZ=NPT-5:45
sessions
--all
