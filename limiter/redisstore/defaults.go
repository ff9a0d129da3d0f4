package redisstore

// Defaults returns the Config a zero Config stands for, every default set,
// so that a caller showing them (rl-exporter check --print-defaults) writes
// none itself. Each call returns a fresh value.
func Defaults() Config {
	return Config{
		Prefix:                    DefaultPrefix,
		Batch:                     BatchConfig{MaxSize: DefaultBatchMaxSize, Senders: DefaultBatchSenders},
		ClusterRefreshMinInterval: DefaultClusterRefreshMinInterval,
		DurabilityTimeout:         DefaultDurabilityTimeout,
	}
}

// ClientDefaults returns the ClientConfig a zero ClientConfig stands for,
// as far as fixed values go: PoolSize's default depends on GOMAXPROCS and
// is left zero. Each call returns a fresh value.
func ClientDefaults() ClientConfig {
	return ClientConfig{
		DialTimeout: DefaultDialTimeout, ReadTimeout: DefaultReadTimeout, WriteTimeout: DefaultWriteTimeout,
		DialAttempts: DefaultDialAttempts, DialRetryBackoff: DefaultDialRetryBackoff,
		ClusterMaxRedirects: DefaultClusterMaxRedirects, ClusterReloadInterval: DefaultClusterReloadInterval,
	}
}
