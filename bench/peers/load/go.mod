// The load generator of bench/peers.sh for Pod CREATEs through kube-apiserver: closed loop (N
// clients) or open loop (a fixed rate). Standard library only.
module draguard.io/bench/peers/load

go 1.26.0
