"""The EvalLog: a run's directory, its episode rows, the writer, recordings, videos, provenance and reports."""
