"""Device health: signals from drivers and kubelets turned into DeviceTaintRules and back."""
