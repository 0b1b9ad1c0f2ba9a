"""Grafana dashboards built as code (Grafana Foundation SDK); `make dashboards` writes them."""
