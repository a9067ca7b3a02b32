"""Tests of servecert/reference_impl/: the reference frontend, operator, planner and traffic split."""
