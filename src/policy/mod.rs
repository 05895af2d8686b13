//! Which expressions and kinds of a policy are checked, and the text of the warnings.
