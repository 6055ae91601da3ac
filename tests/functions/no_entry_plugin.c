/* A shared object that is not a gpufaas plugin: no gf_function_entry. */
int gf_not_a_plugin(int x);
int gf_not_a_plugin(int x)
{
    return x + 1;
}
