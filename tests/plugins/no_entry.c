/* A shared object that is not a tfenc plugin: it lacks the entry symbol. */
int some_other_library_function(int value);

int some_other_library_function(int value)
{
    return value + 1;
}
