package store

const childEnv = "TOOLWIRE_STORE_TEST_CHILD"

func childMain() int { return 0 }
