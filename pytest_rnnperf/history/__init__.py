"""Each case's series over stored runs, its change points, and their rendering."""
