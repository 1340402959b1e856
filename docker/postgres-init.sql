-- Runs once, when the postgres service initialises an empty volume (docker-entrypoint-initdb.d),
-- as POSTGRES_USER, which therefore owns the new database.
-- POSTGRES_DB (groupscale) holds the controller's store; this one holds MLflow's backend store.
CREATE DATABASE mlflow;
