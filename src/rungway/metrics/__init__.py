"""Prometheus metrics: counters fed by each ledger row, gauges read at scrape time."""
