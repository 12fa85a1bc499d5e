// The sweep view's two charts, painted by hand with QPainter. HeatmapWidget colours one metric over
// the grid of min_offload_size (rows, ascending upwards) x max_fwd_stash_size (columns, ascending
// rightwards), with failed, out-of-memory and pending points marked instead of coloured and the
// no-offload baseline shown apart. ParetoWidget plots peak device memory against step time for the
// measured points, with the recommender's front, its choice and the constraint it chose under.
// Both show the same tooltip for a point, report the point under the mouse and ask for its run on a
// click. Every point index here is PointRecord::index (the grid position), never a vector position.
// Declared in sweep_chart.hpp (what both share), heatmap_widget.hpp and pareto_widget.hpp; this
// header brings all three. Code: sweep_chart.cpp, heatmap_widget.cpp, pareto_widget.cpp, and
// their drawing kit (colours, marker shapes, legend, axes) in chart_kit.hpp.
#pragma once

#include "offtune/gui/heatmap_widget.hpp"
#include "offtune/gui/pareto_widget.hpp"
#include "offtune/gui/sweep_chart.hpp"
