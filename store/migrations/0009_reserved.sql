-- Reserved for the migration another branch adds with this number; this
-- branch's own migration is 0010. Dropped when the branches are merged.
SELECT 1;
