env:SESSIONS_FORCE_TTY=80
env:TZ=PST8
stats
--by
model
