stats
