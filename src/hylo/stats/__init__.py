"""Statistics over episode outcomes: intervals, summaries, paired tests, sequential tests and planning."""
