-- Wrong passwords per account. Keep in step with
-- ../mysql/00009_login_failures.sql.

-- +goose Up
CREATE TABLE login_failures (
    user_id  INTEGER NOT NULL PRIMARY KEY REFERENCES users (user_id) ON DELETE CASCADE,
    fails    INTEGER NOT NULL,
    last_us  INTEGER NOT NULL,
    until_us INTEGER NOT NULL
);

-- +goose Down
DROP TABLE login_failures;
