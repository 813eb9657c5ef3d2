#!/bin/sh
# Plays kube-scheduler's part for the example's pod team-a/trainer-0 on a live API
# server: allocates its claim team-a/training (gpu.example.com/node-a/gpu-0) and
# reserves the claim for the pod. A reservation names the pod's UID, which the server
# assigns at creation, so no file can carry it; on a real cluster kube-scheduler writes
# both when it schedules the pod. Run it after `kubectl apply -f examples/cluster.yaml`.
set -eu
pod_uid=$(kubectl get pod trainer-0 -n team-a -o jsonpath='{.metadata.uid}')
kubectl patch resourceclaim training -n team-a --subresource=status --type=merge -p "{
  \"status\": {
    \"allocation\": {
      \"devices\": {\"results\": [{\"request\": \"gpu/h100\", \"driver\": \"gpu.example.com\",
                                  \"pool\": \"node-a\", \"device\": \"gpu-0\"}]},
      \"nodeSelector\": {\"nodeSelectorTerms\": [{\"matchFields\": [
        {\"key\": \"metadata.name\", \"operator\": \"In\", \"values\": [\"node-a\"]}]}]}
    },
    \"reservedFor\": [{\"resource\": \"pods\", \"name\": \"trainer-0\", \"uid\": \"$pod_uid\"}]
  }
}"
