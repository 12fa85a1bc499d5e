// Item models of the dashboard, over immutable snapshots (data.hpp). Each swaps its snapshot
// between beginResetModel() and endResetModel(), so a view never sees a half-updated model; none
// reads the store. One model per header (store_tree_model.hpp, points_table_model.hpp,
// run_summary_model.hpp); this one brings all three.
#pragma once

#include "offtune/gui/points_table_model.hpp"
#include "offtune/gui/run_summary_model.hpp"
#include "offtune/gui/store_tree_model.hpp"
