"""Report sections: each module defines ``SECTION`` (an :class:`estimator.reports.model.Section`)."""
