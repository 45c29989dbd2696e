"""Console views, one module per screen. Each renders its page or, for an
htmx request, only the part that changed."""
