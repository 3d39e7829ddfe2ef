"""Pure data: job specs, records, the lifecycle, units and errors."""
