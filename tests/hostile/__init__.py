"""Hostile objects: a seeded generator of odd and extreme Gangs, DeviceHealthPolicies,
DeviceTaintRules, ResourceSlicePatches and PodGroups, and what each must end in (refused
by the API server's schema naming the field, or accepted and then reported or handled by
draco). The real-cluster run is tests/e2e/test_hostile_objects_real.py."""
