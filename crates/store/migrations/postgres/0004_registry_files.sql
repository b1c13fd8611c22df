-- Writes to the mirror registry's files through one replica's API, logged with the change
-- that numbers them so that every replica writes the same files in the same order: JSON of
-- `[{"name": …, "text": … or null}]`, NULL for a change of configuration objects only.
ALTER TABLE changes ADD COLUMN files TEXT;
